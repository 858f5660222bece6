"""kbus benchmarks: everything compared runs in the same run, on the same machine."""
