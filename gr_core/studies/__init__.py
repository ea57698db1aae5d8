"""Studies: measurements of the methods that the notebooks run, one module per study (docs/architecture.md); each
imports what it measures, and the methods never import a study."""
