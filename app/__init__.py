"""HTTP and command-line front ends for the effective-bottleneck-rate service."""
