# Stand-in for nvcr.io/nvidia/tritonserver:24.10-py3, made by the docker test tier only
# (tests/docker/engine.py): the Triton 2.51 server that the local target runs (from the
# nvidia-pytriton wheel) at NGC's paths, on the Python stand-in (Debian 12, Python 3.11.2) instead of
# Ubuntu 22.04 + Python 3.10.12. It has the Python backend only: no onnxruntime backend and no CUDA
# libraries, so the lab serves the ONNX model through its Python-backend runner, as on `local`.
FROM python:3.11.14-slim-bookworm
COPY tritonserver/ /opt/tritonserver/
ENV PATH=/opt/tritonserver/bin:/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
    LD_LIBRARY_PATH=/opt/tritonserver/lib:/usr/lib/x86_64-linux-gnu
# every library the server and the stub link against is found
RUN ! ldd /opt/tritonserver/bin/tritonserver /opt/tritonserver/backends/python/triton_python_backend_stub \
    | grep "not found"
CMD ["tritonserver"]
