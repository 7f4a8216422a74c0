"""NodeResourcesFit and NodeResourcesBalancedAllocation, with the shared resource scorers."""
