# agentcomms for the parts of a deployment that need no tmux: the gateway and the shared worker
# (see docker-compose.yml). Workers that type into panes run on the machines with the panes.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    AGENTCOMMS_HOME=/data

WORKDIR /src
COPY pyproject.toml README.md ./
COPY agentcomms ./agentcomms
COPY workflows ./workflows
COPY activities ./activities
COPY workers ./workers
COPY gateway ./gateway
COPY mcp_server ./mcp_server
RUN pip install . \
    && useradd --create-home --uid 10001 agentcomms \
    # The home holds the gateway's socket and the deployment's keys: private, as agentcomms
    # requires (a named volume mounted here starts with this owner and mode).
    && install -d -m 0700 -o agentcomms /data

USER agentcomms
WORKDIR /data
ENTRYPOINT ["agentcomms"]
CMD ["gateway"]
