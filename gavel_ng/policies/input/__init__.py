"""What a policy decides from: the scheduling problem's arrays, the entities, the fields it may read."""
