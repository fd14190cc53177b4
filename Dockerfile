# One image for the API and the worker. CPU torch by default; see README for GPU hosts.
FROM python:3.11-slim
WORKDIR /srv/tutor
ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
COPY pyproject.toml README.md ./
COPY app ./app
COPY contracts ./contracts
COPY grading_lab ./grading_lab
COPY ingest ./ingest
COPY worker ./worker
COPY models ./models
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu -e .
COPY data/raw ./data/raw
COPY data/notes ./data/notes
COPY data/taxonomy.yaml data/annotations.yaml ./data/
EXPOSE 8000
CMD ["sh", "-c", "tutor ingest && tutor serve --host 0.0.0.0 --port 8000"]
