from django.urls import path

from . import views
from .metrics import metrics_view
from .routers import register

urlpatterns = [
    path("api/v1/", register().urls),
    path("metrics", metrics_view, name="metrics"),
    path("account/tokens/", views.token_list, name="token_list"),
    path("account/tokens/<int:pk>/revoke/", views.token_revoke_view, name="token_revoke"),
]
