"""Tests that run one client scenario against coterie and the reference Apache Kafka broker."""
