# Stand-in for python:3.11.14-slim-bookworm, made by the docker test tier only (tests/docker/engine.py):
# Debian 12's own Python 3.11 (3.11.2) in a venv at /usr/local, so python, pip and site-packages sit
# where the official image has them. The host's CA bundle goes in here and never into the project's
# Dockerfiles: TLS on the test machine's network is inspected (docs/decisions/2026-11-23-docker-tier.md).
# Some pins (soupsieve 4.1) require Python >= 3.11.5, which the real 3.11.14 meets and Debian's 3.11.2
# does not: pip here ignores Requires-Python (test_image_resolution.py resolves for 3.11.14 itself).
FROM servelab-standin/bookworm-minbase:latest
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 PIP_CERT=/etc/ssl/certs/standin-host-ca.crt \
    SSL_CERT_FILE=/etc/ssl/certs/standin-host-ca.crt PIP_IGNORE_REQUIRES_PYTHON=1
COPY host-ca.crt /etc/ssl/certs/standin-host-ca.crt
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.11 python3.11-venv libpython3.11 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3.11 -m venv /usr/local \
    && ln -sf /usr/local/bin/python3.11 /usr/local/bin/python
CMD ["python3"]
