"""After a failure: known signatures and failure families in every host's logs, and the host and rank that
failed first."""
