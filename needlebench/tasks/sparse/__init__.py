"""S-RT, M-RT and M-RS: needles hidden in a haystack of real text (the information-sparse tasks)."""
