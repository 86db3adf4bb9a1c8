"""Tables, figures and ``report.html`` from OpenCompass work dirs (``build_report``)."""

from .html import assemble, build, build_report, significance_lines, write_report

__all__ = ["assemble", "build", "build_report", "significance_lines", "write_report"]
