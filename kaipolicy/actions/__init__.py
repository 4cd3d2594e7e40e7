"""The actions: allocate, consolidation, reclaim, preempt, stalegangeviction, and what they share."""
