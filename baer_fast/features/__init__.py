"""Evidence features (p, delta, z, z-tilde, stack map phi) and router reliability features (rho)."""
