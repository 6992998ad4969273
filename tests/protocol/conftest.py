from dissector.protocol.decode import tables
from dissector.protocol.generated.apis import APIS

# Every (api_key, version, direction) this build decodes: 368 pairs x request/response = 736.
ALL = [(k, v, d) for k in sorted(APIS) for v in range(APIS[k][1], APIS[k][2] + 1) for d in (0, 1)]


def entry(k, v, d):
    return tables(k)[d][v]


def pytest_generate_tests(metafunc):
    if "decoder" in metafunc.fixturenames:
        metafunc.parametrize("decoder", ALL, ids=[f"{k}v{v}{'req' if d == 0 else 'resp'}" for k, v, d in ALL])
