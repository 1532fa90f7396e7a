"""What users run: configs, metrics, the verifier, the study reproduction, explanations, the CLI."""
