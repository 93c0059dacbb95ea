"""Chat models: the tier router, the fallback model, model failures, the offline model."""
