"""Write-ahead log: framing, group commit, rotation, truncation sidecar and replay."""
