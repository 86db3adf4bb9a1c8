"""From per-sample scores to numbers: means, bootstrap intervals, table cells and plots tasks share."""
