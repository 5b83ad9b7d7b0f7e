"""The PostgreSQL store (``pip install 'threadloom[postgres]'``)."""
