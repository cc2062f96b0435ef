"""The Multus guard (``multus-guard``): live checks before Multus ADD, verification after."""
