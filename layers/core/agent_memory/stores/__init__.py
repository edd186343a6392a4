"""Stores: their settings and provider configuration, registered in one database."""
