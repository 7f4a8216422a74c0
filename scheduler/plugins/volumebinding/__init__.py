"""VolumeBinding plugin package: the plugin, the scheduler volume binder, the assume cache and
the PV/PVC matching helpers the other volume plugins share."""
