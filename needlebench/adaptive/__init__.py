"""adaptive: the length ladder that asks only the prompts deciding the effective length."""
