"""06_calibrate: how far each metric of a run agrees with human labels of its examples.

- `labels`: reading and checking a labels file, and matching it to the run's examples.
- `agreement`: the statistics (rank agreement, ROC, thresholds, confusion, Krippendorff's alpha),
  each from scipy, scikit-learn or the krippendorff package.
"""
