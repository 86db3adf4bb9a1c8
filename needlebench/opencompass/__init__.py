"""Thin OpenCompass adapters over the needlebench core."""
