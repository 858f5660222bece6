"""kbus's gateway: the one way a tenant's messages enter kbus's streams (kbus_contract.intake)."""
