import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _show_workdir_on_failure(request):
    yield
