"""NeedleChain: salary chains where every sentence is needed (the NeedleChain paper)."""
