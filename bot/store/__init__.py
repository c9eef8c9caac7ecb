"""The store: its logic written once over one SQL seam (`sql`), and the two engines that speak it
(`sqlite`, one process; `postgres`, replicas)."""
