"""The local stack: serves template.yaml's HTTP API on loopback, as API Gateway would."""
