"""NATS accounts and least-privilege users for kbus: nats-server's operator-mode trust, account
JWTs pushed to its resolver while it runs, and credentials.

kbus's services run in one account (``KBUS``) that holds every stream, bucket and object store;
each service's user may publish and subscribe only where its stage needs to. Each tenant is an
account of its own with no JetStream: it reaches kbus only through the imports of its own
subjects (``document.added.<tenant>.*``, ``kb.search.<tenant>.*``, its receipts, the parts of
its large texts), which only the operator (kbus) writes into the account's JWT. A reply
subject, a consumer's delivery or any other message a tenant's credential makes the server or
a service send stays in its own account: nothing it holds reaches another tenant or kbus's own
subjects (docs/security.md).

Everything is derived from the catalog (:mod:`kbus_contract.catalog`): a channel's ``use`` says
what a tenant's credential may do with it, and its forms give the subjects.
"""

from kbus_dev.natsauth.claims import (
    account_jwt,
    permissions,
    server_config,
    system_creds,
    tenants_of,
    user_creds,
)
from kbus_dev.natsauth.config import (
    credential_file,
    edited,
    k8s_config_map,
    k8s_secret,
    main,
    provision,
)
from kbus_dev.natsauth.keys import Keys
from kbus_dev.natsauth.push import Plan, push
from kbus_dev.natsauth.services import service_permissions
from kbus_dev.natsauth.tenants import exports, imported, imports, tenant_permissions
from kbus_dev.natsauth.users import (
    KBUS_ACCOUNT,
    SERVICES,
    SYSTEM_ACCOUNT,
    SYSTEM_USER,
    Credential,
    Permissions,
    inbox,
)

__all__ = [
    "KBUS_ACCOUNT",
    "SERVICES",
    "SYSTEM_ACCOUNT",
    "SYSTEM_USER",
    "Credential",
    "Keys",
    "Permissions",
    "Plan",
    "account_jwt",
    "credential_file",
    "edited",
    "exports",
    "imported",
    "imports",
    "inbox",
    "k8s_config_map",
    "k8s_secret",
    "main",
    "permissions",
    "provision",
    "push",
    "server_config",
    "service_permissions",
    "system_creds",
    "tenant_permissions",
    "tenants_of",
    "user_creds",
]
