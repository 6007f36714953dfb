"""One module per Kafka API family; each exposes plain functions `(ctx, request) -> response`."""
