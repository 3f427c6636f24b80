"""Pure Lazy Standby logic (seed 000): no sockets, no threads, no clocks of its own."""
