"""The Ancestral Trace Challenge: the 2025 open-answer form and the 2024 multiple-choice form."""
