"""Task folders, one per benchmark; lmms-eval indexes the YAML files found below this folder."""
