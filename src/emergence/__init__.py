"""emergence: how grounding, token associations and variable binding emerge in small LMs."""
