"""The web console: server-side rendered pages of the cluster's groups, topics and brokers."""
