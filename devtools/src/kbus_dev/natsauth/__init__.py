"""NATS accounts and least-privilege users for kbus: a nats-server ``accounts`` block, and
credentials.

kbus's services run in one account (``KBUS``) that holds every stream, bucket and object store;
each service's user may publish and subscribe only where its stage needs to. Each tenant is an
account of its own with no JetStream: it reaches kbus only through the imports of its own
subjects (``document.added.<tenant>.*``, ``kb.search.<tenant>.*``, its receipts, its store of
large texts), which kbus's exports bind to the importing account's name
(``account_token_position``). A reply subject, a consumer's delivery or any other message a
tenant's credential makes the server or a service send stays in its own account: nothing it
holds reaches another tenant or kbus's own subjects (docs/security.md).

Everything is derived from the catalog (:mod:`kbus_contract.catalog`): a channel's ``use`` says
what a tenant's credential may do with it, and its forms give the subjects.
"""

from kbus_dev.natsauth.config import (
    accounts,
    credential_file,
    generate_passwords,
    k8s_config_map,
    k8s_secret,
    main,
    permissions,
    server_config,
    tenants_of,
)
from kbus_dev.natsauth.services import service_permissions
from kbus_dev.natsauth.tenants import exports, imports, tenant_permissions
from kbus_dev.natsauth.users import KBUS_ACCOUNT, SERVICES, Credential, Permissions, inbox

__all__ = [
    "KBUS_ACCOUNT",
    "SERVICES",
    "Credential",
    "Permissions",
    "accounts",
    "credential_file",
    "exports",
    "generate_passwords",
    "imports",
    "inbox",
    "k8s_config_map",
    "k8s_secret",
    "main",
    "permissions",
    "server_config",
    "service_permissions",
    "tenant_permissions",
    "tenants_of",
]
