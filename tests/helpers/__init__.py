r"""What several test files share: generated toy datasets (xlsa17,
Planetoid), the bad-input table runner, the host-synchronisation detector,
a tiny ZSL configuration and the example scripts as modules."""
