"""DynamicResources (Dynamic Resource Allocation): see ``plugin``."""
