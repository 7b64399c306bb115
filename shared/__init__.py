"""Code both casscade stages import: CLI entry point, codecs, schemas, config, dev stack."""
