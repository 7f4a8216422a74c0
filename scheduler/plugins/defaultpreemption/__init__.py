"""DefaultPreemption: the PostFilter that evicts lower-priority pods when nothing else fits.

``plugin`` holds the plugin (eligibility, per-node victim selection, the asynchronous
preparation of the chosen node); ``evaluator`` holds the pieces that do not depend on the
plugin's state (PDB accounting, the dry run over candidate nodes, picking one candidate).
"""
