"""The comparison table and figure of the study's runs."""
