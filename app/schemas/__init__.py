"""Pydantic request and response models of the HTTP API."""
