"""Development tools of the checkout (dodo.py runs them); not part of the gymbuild package."""
