"""Dynamic Resource Allocation (resource.k8s.io/v1) without the framework: the CEL device
selectors (``cel``), ResourceSlices gathered into pools (``inventory``) and the structured
allocator (``allocator``).  Pure functions over API dicts; the DynamicResources plugin and
``explain`` call them."""
