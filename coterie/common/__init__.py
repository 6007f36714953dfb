"""What several layers share and no layer owns: Kafka's group-to-partition hash
(`partitioning`) and the bounded table of shared immutable values (`shared_table`)."""
