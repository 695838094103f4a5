"""The plan census in the terminal, as JSON and as an HTML grid."""
