"""validation/: Z3 translation validation of shape guards and valid-size enumeration. Not built yet (no issue taken); see README."""
